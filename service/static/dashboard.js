// Reload the dashboard when its reliability document changes (the ETag moves on).
const page = document.body.dataset;

async function poll() {
  const r = await fetch(page.reliabilityUrl, {headers: {"If-None-Match": page.etag}, credentials: "same-origin"});
  if (r.status === 200) location.reload();
}

setInterval(poll, 10000);
