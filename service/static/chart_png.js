// "PNG" links under each chart: draw the chart's own SVG onto a canvas at twice its size and
// save it as a PNG, in the browser (the server sends SVG and CSV; it needs no image library).
async function chartPng(svg) {
  const image = new Image();
  image.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(new XMLSerializer().serializeToString(svg));
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = 2 * svg.width.baseVal.value;
  canvas.height = 2 * svg.height.baseVal.value;
  const context = canvas.getContext("2d");
  context.scale(2, 2);
  context.drawImage(image, 0, 0);
  return canvas.toDataURL("image/png");
}

for (const link of document.querySelectorAll("a.png")) {
  link.addEventListener("click", async (event) => {
    event.preventDefault();
    const save = document.createElement("a");
    save.href = await chartPng(document.getElementById(link.dataset.chart));
    save.download = link.dataset.chart + ".png";
    save.click();
  });
}
