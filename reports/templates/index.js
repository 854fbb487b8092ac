/* highwater results index: filter the runs table by verdict and test. No network use. */
(function () {
  "use strict";
  var verdict = document.getElementById("filter-verdict");
  var test = document.getElementById("filter-test");
  var rows = Array.prototype.slice.call(document.querySelectorAll("table.runs tbody tr.run"));
  var shown = document.getElementById("shown-count");
  function apply() {
    var v = verdict.value, t = test.value, n = 0;
    rows.forEach(function (r) {
      var match = !v || r.getAttribute("data-verdict") === v ||
          (v === "failures" && r.getAttribute("data-failure") === "1") ||
          (v === "expected" && r.getAttribute("data-expect") === "as-expected");
      var ok = match && (!t || r.getAttribute("data-test") === t);
      r.hidden = !ok;
      if (ok) n += 1;
    });
    shown.textContent = String(n);
    var q = [];
    if (v) q.push("verdict=" + encodeURIComponent(v));
    if (t) q.push("test=" + encodeURIComponent(t));
    try {
      history.replaceState(null, "", q.length ? "#" + q.join("&") : location.pathname);
    } catch (e) { /* some file:// contexts refuse; the filter still works */ }
  }
  function fromHash() {
    location.hash.slice(1).split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i < 0) return;
      var k = kv.slice(0, i), val = decodeURIComponent(kv.slice(i + 1));
      if (k === "verdict") verdict.value = val;
      if (k === "test") test.value = val;
    });
  }
  verdict.addEventListener("change", apply);
  test.addEventListener("change", apply);
  fromHash();
  apply();
})();
