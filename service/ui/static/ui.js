// cpsched dashboard: the little behaviour the server-rendered pages need.
// * "refresh every 30 s" (on unless switched off; remembered in this browser) fetches the
//   page again and swaps its content in place, keeping the scroll and the focus's place;
// * the decision log's filter applies as soon as it is ticked.
"use strict";
(function () {
  var KEY = "cpsched.autorefresh";
  var box = document.getElementById("autorefresh");
  if (box) {
    var timer = null;
    var refresh = function () {
      fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (answer) {
          if (!answer.ok || answer.redirected) { window.location.reload(); return null; }
          return answer.text();
        })
        .then(function (html) {
          if (html === null) { return; }
          var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("main");
          var main = document.getElementById("main");
          if (fresh && main) {
            var x = window.scrollX, y = window.scrollY;
            main.replaceChildren.apply(main, Array.prototype.slice.call(fresh.childNodes));
            window.scrollTo(x, y);
          }
        })
        .catch(function () { /* the service is away: try again at the next tick */ })
        .then(arm);
    };
    var arm = function () {
      if (timer) { clearTimeout(timer); timer = null; }
      if (box.checked) { timer = setTimeout(refresh, 30000); }
    };
    try { box.checked = window.localStorage.getItem(KEY) !== "0"; } catch (e) { box.checked = true; }
    box.addEventListener("change", function () {
      try { window.localStorage.setItem(KEY, box.checked ? "1" : "0"); } catch (e) { /* storage off */ }
      arm();
    });
    arm();
  }
  // Delegated: the checkbox is new after each in-place refresh.
  document.addEventListener("change", function (event) {
    var only = event.target;
    if (only && only.id === "only-fallbacks" && only.form) { only.form.submit(); }
  });
})();
