// cpsched dashboard: the little behaviour the server-rendered pages need.
// * "refresh every 30 s" (remembered in this browser) reloads the page;
// * the decision log's filter applies as soon as it is ticked.
"use strict";
(function () {
  var KEY = "cpsched.autorefresh";
  var box = document.getElementById("autorefresh");
  if (box) {
    var timer = null;
    var arm = function () {
      if (timer) { clearTimeout(timer); timer = null; }
      if (box.checked) { timer = setTimeout(function () { window.location.reload(); }, 30000); }
    };
    try { box.checked = window.localStorage.getItem(KEY) === "1"; } catch (e) { /* storage off */ }
    box.addEventListener("change", function () {
      try { window.localStorage.setItem(KEY, box.checked ? "1" : "0"); } catch (e) { /* storage off */ }
      arm();
    });
    arm();
  }
  var only = document.getElementById("only-fallbacks");
  if (only && only.form) {
    only.addEventListener("change", function () { only.form.submit(); });
  }
})();
