// Gallery figures are scaled to the column: a click opens the full-size image.
document.addEventListener("DOMContentLoaded", () => {
  for (const img of document.querySelectorAll("img.sphx-glr-single-img, img.sphx-glr-multi-img")) {
    if (img.closest("a")) continue;
    const link = document.createElement("a");
    link.href = img.currentSrc || img.src;
    link.className = "skacv-enlarge";
    img.replaceWith(link);
    link.appendChild(img);
  }
});
