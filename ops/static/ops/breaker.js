// The breaker panel's select wears the colour of the state it names.
(function () {
  "use strict";
  function start() {
    var select = document.querySelector(".breaker-form select");
    if (!select) return;  // no form for those who may only read the panel
    function paint() { select.className = select.value; }
    select.addEventListener("change", paint);
    paint();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
