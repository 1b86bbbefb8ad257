"""What a user of the second project does, through its own URLs: create a task, run it now,
wait for the run to finish. Prints one JSON object of what was seen."""

import json
import os
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.test import Client  # noqa: E402

API = "/scheduler/api/"
FINISHED = {"completed", "failed", "expired", "cancelled", "skipped"}

seen: dict[str, object] = {"anonymous": Client().get(API + "tasks").status_code}
user = get_user_model().objects.create_superuser("ops", "ops@example.com", "not-used")
client = Client()
client.force_login(user)
task = {
    "id": "greet",
    "name": "Greet",
    "action": "echo",
    "payload": {"message": "hello from the second project"},
}
seen["create"] = client.post(API + "tasks", task, content_type="application/json").status_code
started = client.post(API + "tasks/greet/execute", {}, content_type="application/json")
seen["execute"] = started.status_code
run = started.json()
deadline = time.monotonic() + 60
while run.get("status") not in FINISHED and time.monotonic() < deadline:
    time.sleep(0.2)
    run = client.get(API + f"runs/{run['id']}").json()
seen["run"] = {key: run.get(key) for key in ("status", "output", "truncated", "worker", "error")}
seen["overview"] = client.get("/scheduler/admin/overview/").status_code
print(json.dumps(seen))
