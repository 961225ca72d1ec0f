"""Realistic synthetic catalogs of any size, for the scale and load benchmarks.

Tools come from templates of real tool families (ticketing, CRM, billing, source
control, chat, calendar, mail, storage, cloud, databases, monitoring, HR, commerce,
analytics), each offered by several vendors. Many tenants each register their own
copies of the integrations they use, so the catalog is full of near-duplicates
(same action, other vendor or other tenant) the way a shared platform is; each
tool is scoped to its family and to one tenant or a few.

``generate(n, seed)`` returns ``n`` tools.jsonl-shaped records with scopes and
tenants; ``queries(records, n, seed)`` returns user requests with their gold tool.
"""

from __future__ import annotations

import random
from typing import Any

#: family -> (vendors, objects, actions, scope prefix)
FAMILIES: dict[str, tuple[list[str], list[str], list[str]]] = {
    "ticketing": (["jira", "linear", "zendesk", "servicenow"],
                  ["issue", "ticket", "comment", "sprint", "epic"],
                  ["create", "update", "close", "assign", "search", "get"]),
    "crm": (["salesforce", "hubspot", "pipedrive"],
            ["contact", "lead", "opportunity", "account", "deal note"],
            ["create", "update", "search", "get", "delete", "merge"]),
    "billing": (["stripe", "chargebee", "zuora"],
                ["invoice", "refund", "subscription", "payment", "coupon"],
                ["create", "list", "get", "cancel", "issue", "void"]),
    "source": (["github", "gitlab", "bitbucket"],
               ["pull request", "repository", "branch", "release", "workflow run"],
               ["create", "merge", "list", "get", "delete", "rerun"]),
    "chat": (["slack", "teams", "discord"],
             ["message", "channel", "thread", "reaction", "user status"],
             ["send", "post", "archive", "list", "search", "pin"]),
    "calendar": (["gcal", "outlook", "calendly"],
                 ["event", "meeting", "availability", "room booking", "reminder"],
                 ["create", "reschedule", "cancel", "find", "list"]),
    "mail": (["gmail", "sendgrid", "mailchimp"],
             ["email", "draft", "campaign", "mailing list", "template"],
             ["send", "draft", "schedule", "list", "delete"]),
    "storage": (["s3", "gdrive", "dropbox", "box"],
                ["file", "folder", "share link", "bucket", "document"],
                ["upload", "download", "delete", "share", "list", "move"]),
    "cloud": (["aws", "gcp", "azure", "k8s"],
              ["instance", "cluster", "pod", "load balancer", "dns record"],
              ["start", "stop", "restart", "scale", "describe", "delete"]),
    "database": (["postgres", "mysql", "snowflake", "bigquery"],
                 ["table", "query", "backup", "index", "user grant"],
                 ["run", "create", "drop", "restore", "describe"]),
    "monitoring": (["datadog", "pagerduty", "grafana", "sentry"],
                   ["alert", "incident", "dashboard", "metric", "error event"],
                   ["acknowledge", "resolve", "create", "query", "mute", "list"]),
    "hr": (["workday", "bamboohr", "greenhouse"],
           ["employee", "time off request", "candidate", "job posting", "payroll run"],
           ["create", "approve", "reject", "get", "list", "update"]),
    "commerce": (["shopify", "magento", "woocommerce"],
                 ["order", "product", "inventory level", "shipment", "customer"],
                 ["find", "create", "update", "cancel", "track", "list"]),
    "analytics": (["mixpanel", "amplitude", "ga4"],
                  ["report", "funnel", "cohort", "event count", "segment"],
                  ["run", "export", "create", "get", "compare"]),
}  # fmt: skip

SYNONYMS = {
    "create": ["open", "make", "add", "start a new"],
    "update": ["change", "edit", "modify"],
    "close": ["resolve", "shut", "finish"],
    "search": ["look up", "find", "query"],
    "get": ["show me", "fetch", "pull up"],
    "delete": ["remove", "get rid of", "erase"],
    "list": ["show all", "enumerate", "what are the"],
    "cancel": ["call off", "abort", "stop"],
    "send": ["message", "deliver", "shoot over"],
    "find": ["locate", "look for", "where is"],
    "restart": ["reboot", "bounce", "kick"],
}

PARAM_TYPES = {
    "id": {"type": "string", "description": "Identifier of the {obj}"},
    "limit": {"type": "integer", "description": "Maximum number of results", "minimum": 1},
    "query": {"type": "string", "description": "Free-text filter"},
    "note": {"type": "string", "description": "Optional note recorded with the change"},
    "dry_run": {"type": "boolean", "description": "Only validate, change nothing"},
}


def _snake(text: str) -> str:
    return text.replace(" ", "_")


def _tool(
    family: str, vendor: str, obj: str, action: str, tenant: str, variant: int
) -> dict[str, Any]:
    suffix = f".v{variant}" if variant else ""
    tid = f"{tenant}.{vendor}.{_snake(action)}_{_snake(obj)}{suffix}"
    params: dict[str, Any] = {}
    required: list[str] = []
    if action in ("list", "search", "find", "query", "run", "export"):
        params["query"] = dict(PARAM_TYPES["query"])
        params["limit"] = dict(PARAM_TYPES["limit"])
    else:
        key = f"{_snake(obj)}_id"
        described = str(PARAM_TYPES["id"]["description"]).format(obj=obj)
        params[key] = {"type": "string", "description": described}
        required.append(key)
        params["note"] = dict(PARAM_TYPES["note"])
    if action in ("delete", "drop", "cancel", "void", "merge"):
        params["dry_run"] = dict(PARAM_TYPES["dry_run"])
    destructive = action in ("delete", "drop", "void")
    writes = action not in ("get", "list", "search", "find", "describe", "query", "export")
    desc = f"{action.capitalize()} a {obj} in {vendor.capitalize()}"
    if variant:
        desc += f" (API v{variant + 1}, kept for older clients)"
    desc += "."
    return {
        "id": tid,
        "name": f"{vendor}_{_snake(action)}_{_snake(obj)}",
        "description": desc,
        "parameters": {"type": "object", "properties": params, "required": required},
        "source": f"gen:{family}",
        "group": f"{vendor}.{_snake(obj)}",
        "scopes": [f"{family}:{'write' if writes else 'read'}"],
        "tenants": [tenant],
        "risk": "destructive" if destructive else ("write" if writes else "read"),
    }


def generate(n: int, seed: int = 7, tenants: int = 0) -> list[dict[str, Any]]:
    """``n`` distinct tools: tenants' copies of vendor actions, some in two API versions."""
    rng = random.Random(seed)
    tenants = tenants or max(4, n // 250)
    combos = [
        (family, vendor, obj, action)
        for family, (vendors, objects, actions) in FAMILIES.items()
        for vendor in vendors
        for obj in objects
        for action in actions
    ]
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    t = 0
    while len(out) < n:
        tenant = f"t{t % tenants:04d}"
        # each tenant uses a random ~25% of the integrations; some with an old API version
        for family, vendor, obj, action in rng.sample(combos, k=max(1, len(combos) // 4)):
            variant = 1 if rng.random() < 0.08 else 0
            shared = rng.random() < 0.05  # a platform-wide tool every tenant may use
            rec = _tool(family, vendor, obj, action, "shared" if shared else tenant, variant)
            if shared:
                rec["tenants"] = []
            if rec["id"] in seen:
                continue
            seen.add(rec["id"])
            out.append(rec)
            if len(out) >= n:
                break
        t += 1
    return out


def queries(records: list[dict[str, Any]], n: int, seed: int = 11) -> list[dict[str, Any]]:
    """Requests in users' words, each with the tool it asks for and that tool's tenant."""
    rng = random.Random(seed)
    out = []
    for rec in rng.sample(records, k=min(n, len(records))):
        _, vendor, rest = rec["id"].split(".", 2)
        action_obj = rest.split(".")[0]
        action = (
            next(a for a in SYNONYMS if action_obj.startswith(a + "_"))
            if any(action_obj.startswith(a + "_") for a in SYNONYMS)
            else action_obj.split("_")[0]
        )
        obj = action_obj[len(action) + 1 :].replace("_", " ")
        verb = rng.choice(SYNONYMS.get(action, [action]))
        text = rng.choice(
            [
                f"{verb} the {obj} in {vendor}",
                f"can you {verb} that {obj} for me on {vendor}",
                f"{vendor}: {verb} {obj} 4821",
            ]
        )
        scope = rec["scopes"][0].split(":")[0] + ":*"
        tenant = rec["tenants"][0] if rec["tenants"] else "t0000"
        out.append({"query": text, "gold": [rec["id"]], "tenant": tenant, "scope": scope})
    return out
