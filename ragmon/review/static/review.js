// Keyboard shortcuts for the common labelling path. Loaded as a file (the CSP forbids inline script).
(function () {
  "use strict";
  function typing(el) {
    return el && (el.tagName === "TEXTAREA" || el.tagName === "SELECT" ||
      (el.tagName === "INPUT" && ["text", "password", "search"].indexOf(el.type) >= 0));
  }
  function cycle(fieldset) {
    var radios = fieldset.querySelectorAll("input[type=radio]");
    var i = -1;
    radios.forEach(function (r, j) { if (r.checked) { i = j; } });
    radios[(i + 1) % radios.length].checked = true;
  }
  document.addEventListener("keydown", function (ev) {
    var form = document.getElementById("label-form");
    if (!form || ev.altKey || ev.metaKey) { return; }
    if (ev.key === "Enter" && (ev.ctrlKey || !typing(ev.target))) {
      ev.preventDefault();
      form.requestSubmit();
      return;
    }
    if (ev.ctrlKey || typing(ev.target)) { return; }
    if (ev.key === "y") {
      form.querySelectorAll("fieldset.tri input[value=yes]").forEach(function (r) { r.checked = true; });
    } else if (ev.key === "x") {
      var golden = form.querySelector("input[name=add_to_golden]");
      golden.checked = !golden.checked;
    } else if (ev.key === "n") {
      var next = document.getElementById("next-item");
      if (next) { window.location.href = next.href; }
    } else {
      var fs = form.querySelector("fieldset.tri[data-key='" + ev.key + "']");
      if (!fs) { return; }
      cycle(fs);
    }
    ev.preventDefault();
  });
})();
