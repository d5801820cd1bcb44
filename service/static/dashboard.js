// Reload the dashboard when its reliability document changes (the ETag moves on).
const page = document.body.dataset;

async function poll() {
  const r = await fetch(page.reliabilityUrl, {headers: {"If-None-Match": page.etag}, credentials: "same-origin"});
  if (r.status === 200) location.reload();
}

// A page showing an older document while the fresh one is computed looks again soon.
setInterval(poll, page.refreshing === "true" ? 1000 : 10000);
