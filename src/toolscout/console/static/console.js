// The console's only script: progress while a form is being answered, and
// keyboard-friendly confirmation for administrative actions. No inline code anywhere.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("form[data-progress]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      var confirmText = form.getAttribute("data-confirm");
      if (confirmText && !window.confirm(confirmText)) {
        event.preventDefault();
        return;
      }
      var status = document.getElementById("progress");
      if (status) {
        status.textContent = form.getAttribute("data-progress");
        status.hidden = false;
      }
      form.querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = true; });
    });
  });
  document.querySelectorAll("a[data-progress]").forEach(function (link) {
    link.addEventListener("click", function () {
      var status = document.getElementById("progress");
      if (status) {
        status.textContent = link.getAttribute("data-progress");
        status.hidden = false;
      }
    });
  });
  // the principal pickers show only the fields of the chosen mode
  document.querySelectorAll("select[data-mode]").forEach(function (select) {
    var side = select.getAttribute("data-mode");
    var sync = function () {
      document.querySelectorAll("[data-mode-of='" + side + "']").forEach(function (el) {
        el.hidden = el.getAttribute("data-when") !== select.value;
      });
    };
    select.addEventListener("change", sync);
    sync();
  });
});
