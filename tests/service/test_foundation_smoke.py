def test_healthz(client):
    r = client.get("/healthz")
    assert r.status_code == 200, r.text
    assert r.json() == {"status": "ok", "database": "ok"}


def test_project_roundtrip(client, project):
    pid = project["id"]
    r = client.post(f"/projects/{pid}/labels", json=[{"item": "i1", "rater": "judge", "value": "pass"}])
    assert r.status_code == 200, r.text
    assert r.json() == {"accepted": 1, "duplicates": 0, "label_seq": 1}
    r = client.get(f"/projects/{pid}/labels")
    assert r.status_code == 200, r.text
    print(r.json())
