// Click an output figure to see it at full size in a new tab (a figure inline in the
// page, as a folded one is, opens in a page of its own: browsers refuse to navigate to
// a data: address).
document.addEventListener("click", function (e) {
  var img = e.target;
  if (img.tagName !== "IMG" || !img.closest("div.cell_output")) return;
  if (img.src.indexOf("data:") === 0) {
    var w = window.open("", "_blank");
    if (w) {
      var big = w.document.createElement("img");
      big.src = img.src;
      big.alt = img.alt;
      w.document.body.appendChild(big);
    }
  } else {
    window.open(img.src, "_blank");
  }
});
