// Redraws the dashboard every few seconds from ?partial=1 (same origin, nothing else
// is fetched); says so when a refresh fails, and waits while the tab is hidden.
(function () {
  "use strict";
  function start() {
    var root = document.getElementById("ops-dashboard");
    if (!root) return;
    var every = (parseInt(root.dataset.refresh, 10) || 5) * 1000;
    var lastOk = Date.now();
    function mark() {
      var badge = document.getElementById("ops-freshness");
      if (!badge) return;
      var late = Date.now() - lastOk > every * 2.5;
      badge.classList.toggle("stale", late);
      if (late) badge.textContent = "not updated for " + Math.round((Date.now() - lastOk) / 1000) + "s";
    }
    function refresh() {
      if (document.hidden) return;
      var url = new URL(root.dataset.url, window.location.href);
      fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
        .then(function (response) {
          if (!response.ok || response.redirected) throw new Error("HTTP " + response.status);
          return response.text();
        })
        .then(function (html) {
          root.innerHTML = html;
          lastOk = Date.now();
          root.dataset.refreshed = String(lastOk);
          root.dispatchEvent(new CustomEvent("ops:refreshed"));
        })
        .catch(mark);
    }
    setInterval(refresh, every);
    setInterval(mark, 1000);
    document.addEventListener("visibilitychange", function () { if (!document.hidden) refresh(); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
