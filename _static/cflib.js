// Click an output figure to see it at full size in a new tab.
document.addEventListener("click", function (e) {
  var img = e.target;
  if (img.tagName === "IMG" && img.closest("div.cell_output")) {
    window.open(img.src, "_blank");
  }
});
