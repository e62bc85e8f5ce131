(function () {
  "use strict";
  var table = document.getElementById("run-table");
  if (!table) { return; }
  var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
  var tools = document.getElementById("run-tools"), filter = document.getElementById("run-filter");
  var select = document.getElementById("run-sort"), count = document.getElementById("run-count");
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var state = {key: "date", dir: "desc"};
  function value(row, key) { return row.getAttribute("data-" + key) || ""; }
  function compare(a, b) {
    var x = value(a, state.key), y = value(b, state.key), nx = parseFloat(x), ny = parseFloat(y), c;
    if (x === "" || y === "") { c = x === y ? 0 : (x === "" ? 1 : -1); return c; }
    c = (!isNaN(nx) && !isNaN(ny) && String(nx) === x && String(ny) === y) ? nx - ny : x.localeCompare(y);
    return state.dir === "asc" ? c : -c;
  }
  function sort() {
    rows.slice().sort(function (a, b) { return compare(a, b) || rows.indexOf(a) - rows.indexOf(b); })
      .forEach(function (r) { body.appendChild(r); });
    heads.forEach(function (h) {
      h.setAttribute("aria-sort", h.getAttribute("data-key") !== state.key ? "none"
        : (state.dir === "asc" ? "ascending" : "descending"));
    });
    select.value = state.key + ":" + state.dir;
  }
  function apply() {
    var terms = filter.value.toLowerCase().split(/\s+/).filter(Boolean), shown = 0;
    rows.forEach(function (r) {
      var text = r.textContent.toLowerCase(), ok = terms.every(function (t) {
        var i = t.indexOf(":"), key = i > 0 ? t.slice(0, i) : "";
        if (key && r.hasAttribute("data-" + key)) {  // agent:mean, seed:3, verdicts:unsafe ... one column
          return value(r, key).toLowerCase().indexOf(t.slice(i + 1)) >= 0;
        }
        return text.indexOf(t) >= 0;
      });
      r.hidden = !ok;
      if (ok) { shown += 1; }
    });
    count.textContent = shown + " of " + rows.length + " runs";
  }
  heads.forEach(function (h) {
    var b = h.querySelector("button");
    if (!b) { return; }
    b.addEventListener("click", function () {
      var key = h.getAttribute("data-key");
      state = {key: key, dir: state.key === key && state.dir === "asc" ? "desc" : "asc"};
      sort();
    });
  });
  select.addEventListener("change", function () {
    var kv = select.value.split(":");
    state = {key: kv[0], dir: kv[1]};
    sort();
  });
  filter.addEventListener("input", apply);
  tools.hidden = false;
  apply();
}());
