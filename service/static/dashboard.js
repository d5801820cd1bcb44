// Reload the dashboard when its reliability document changes (the ETag moves on). One poll at a
// time: a poll of a large project waits while its fresh document is computed, and polls do not pile up.
const page = document.body.dataset;
// A page showing an older document while the fresh one is computed looks again soon.
const pause = page.refreshing === "true" ? 1000 : 10000;
// A page drawn while the pool-score history is replayed (it says how far) reloads until the replay is done.
if (page.historyRebuilding === "true") {
  setTimeout(() => location.reload(), 2000);
}

async function poll() {
  try {
    const r = await fetch(page.reliabilityUrl, {headers: {"If-None-Match": page.etag}, credentials: "same-origin"});
    if (r.status === 200) {
      location.reload();
      return;
    }
  } catch (e) {
    // the server is away for a moment: look again later
  }
  setTimeout(poll, pause);
}

setTimeout(poll, pause);
