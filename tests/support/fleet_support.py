"""What the fleet suites (tests/integration/fleet_test.py and
fleet_workers_test.py) share: the admin API's view of the replicas, fault
injection, a held-open stream, and a plain chat."""

import json
import threading

from troupe_harness import check, sse_events

def replicas(srv):
    r, text = srv.request("GET", "/admin/replicas")
    return json.loads(text)["data"] if r.status == 200 else None


def queued(srv, replica):
    """Requests routed to a replica and not yet running there."""
    r = replicas(srv)[replica]
    return r["in_flight"] + r["waiting"]


def admin(srv, replica, action):
    r, text = srv.request("POST", f"/admin/replicas/{replica}/{action}")
    check(r.status == 200, f"admin: replica {replica} {action} ({r.status}: {text[:80]})")


class open_stream:
    """A streaming chat request read event by event."""

    def __init__(self, srv, content, max_tokens):
        self.c = srv.conn()
        body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "ignore_eos": True,
                "stream": True}
        self.c.request("POST", "/v1/chat/completions", body=json.dumps(body))
        self.r = self.c.getresponse()
        self.replica = self.r.getheader("x-troupe-replica")
        self.buf = b""

    def next_event(self):
        while b"\n\n" not in self.buf:
            chunk = self.r.read1(65536)
            if not chunk:
                return None
            self.buf += chunk
        event, self.buf = self.buf.split(b"\n\n", 1)
        return event.decode()[len("data: "):]

    def first_token(self):
        while True:
            e = self.next_event()
            if e is None or e == "[DONE]":
                return False
            obj = json.loads(e)
            if any(ch.get("delta", {}).get("content") for ch in obj.get("choices", [])):
                return True

    def rest(self):
        events = []
        while True:
            e = self.next_event()
            if e is None:
                break
            events.append(e)
            if e == "[DONE]":
                break
        self.c.close()
        return events


def finished_normally(events):
    objs = [json.loads(e) for e in events if e != "[DONE]"]
    return bool(events) and events[-1] == "[DONE]" and any(
        ch.get("finish_reason") == "length" for o in objs for ch in o.get("choices", []))


def error_event(events):
    objs = [json.loads(e) for e in events if e != "[DONE]"]
    errs = [o["error"] for o in objs if "error" in o]
    return errs[0] if errs and events[-1] == "[DONE]" else None


def chat(srv, content, max_tokens=8):
    return srv.request("POST", "/v1/chat/completions",
                       {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
                        "ignore_eos": True})
