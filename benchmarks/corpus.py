"""Deterministic, realistic agent conversations and search queries for the benchmarks.

Messages read like a support and operations agent's work: orders, deployments, invoices,
incidents, with ids, names, amounts and dates, some non-ASCII text, and lengths from one line to a
paragraph. The same seed always gives the same corpus, so runs compare like with like.
"""
import random

PEOPLE = ["Ana", "Bruno", "Chloé", "Dmitri", "Emeka", "Fatima", "Grace", "Hiroshi", "Inês", "Jonas",
          "Kavya", "Lars", "Mariana", "Noah", "Olga", "Pedro", "Quentin", "Rosa", "Sven", "Yuki"]
CITIES = ["São Paulo", "Zürich", "Lisbon", "Berlin", "Austin", "Kraków", "Osaka", "Nairobi", "Montréal",
          "Bogotá"]
SERVICES = ["billing-api", "checkout", "search-indexer", "auth-gateway", "payments-worker", "notifications",
            "inventory-sync", "report-builder", "media-cdn", "ledger"]
PRODUCTS = ["espresso machine", "standing desk", "noise-cancelling headphones", "running shoes",
            "mechanical keyboard", "air purifier", "camping tent", "electric kettle", "office chair",
            "smart thermostat"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
ISSUES = ["timeout", "memory leak", "duplicate charge", "missing refund", "slow query", "certificate expiry",
          "rate limit", "stale cache", "failed migration", "broken webhook"]

USER_TEMPLATES = [
    "Hi, my order {order} for the {product} still hasn't arrived. It was supposed to ship on {day}.",
    "Can you check why I was charged twice for invoice {invoice}? The amount was {amount}.",
    "I moved to {city}, please update the delivery address for order {order}.",
    "What's the status of the {service} deployment? {person} said it would go out {day}.",
    "We're seeing a {issue} on {service} since this morning, error {error}. Any idea?",
    "Please cancel the subscription renewal and refund {amount} to my card ending {card}.",
    "Is the {product} covered by the warranty? I bought it in {city} last year.",
    "Remind me what we decided about the {issue} on {service} in last week's review.",
    "Can you summarize the open items from the incident with {person}?",
    "How do I reset my password? The link from {day} says it expired.",
]
ASSISTANT_TEMPLATES = [
    "I found order {order}: the {product} left our warehouse on {day} and is with the carrier. "
    "Tracking shows it in {city}; delivery is expected within two business days.",
    "Invoice {invoice} was indeed charged twice ({amount} each). I have opened refund {refund}; it "
    "usually reaches the card within 5 to 7 days.",
    "Done: order {order} will now ship to {city}. You'll get a confirmation email shortly.",
    "The {service} deployment is scheduled for {day}. {person} is the release owner and the change "
    "freeze ends right before it.",
    "Error {error} on {service} points to a {issue}. I restarted two pods and opened incident {incident}; "
    "{person} is investigating the root cause.",
    "Your renewal is cancelled and refund {refund} for {amount} is on its way to the card ending {card}.",
    "Yes, the {product} has a two-year warranty. Keep the receipt from {city}; a claim takes about a week.",
    "In the review we agreed to add an alert for the {issue} on {service} and to revisit it on {day}. "
    "{person} owns the follow-up.",
    "Open items from incident {incident}: confirm the fix on {service}, write the postmortem, and "
    "schedule the {issue} drill with {person}.",
    "Use the 'Forgot password' link on the sign-in page; new links are valid for 30 minutes. If it "
    "still fails, I can send one to the address on file.",
]

QUERIES = [
    "refund", "order status", "deployment friday", "billing-api timeout", "duplicate charge",
    "warranty", "password reset", "memory leak", "Zürich", "São Paulo delivery", "incident postmortem",
    "checkout", "\"change freeze\"", "espresso machine", "refund card", "rate limit", "certificate expiry",
    "what's the status of the deployment?", "invoice", "stale cache ledger", "Chloé", "tracking carrier",
    "cancel subscription", "webhook", "root cause", "search-indexer slow query", "noise-cancelling",
    "standing desk order", "open items", "Kraków", "auth-gateway", "\"two-year warranty\"", "renewal",
    "alert review", "payments-worker failed migration", "media-cdn", "thermostat", "release owner",
    "Hiroshi", "Montréal address", "refund 5 to 7 days", "pods restarted", "inventory-sync",
    "confirmation email", "receipt claim", "drill", "Bogotá", "report-builder error", "kettle", "ETA?",
]


def _slots(rng):
    return {
        "order": f"#{rng.randrange(10000, 99999)}",
        "invoice": f"INV-{rng.randrange(1000, 9999)}",
        "refund": f"RF-{rng.randrange(100000, 999999)}",
        "incident": f"INC-{rng.randrange(100, 999)}",
        "error": f"E{rng.randrange(100, 599)}",
        "card": f"{rng.randrange(1000, 9999)}",
        "amount": f"${rng.randrange(5, 900)}.{rng.randrange(100):02d}",
        "product": rng.choice(PRODUCTS),
        "person": rng.choice(PEOPLE),
        "city": rng.choice(CITIES),
        "service": rng.choice(SERVICES),
        "day": rng.choice(WEEKDAYS),
        "issue": rng.choice(ISSUES),
    }


def conversation_texts(count, seed=11):
    """``count`` (role, text) pairs, alternating user and assistant, a reply answering its question."""
    rng = random.Random(seed)
    texts = []
    while len(texts) < count:
        topic = rng.randrange(len(USER_TEMPLATES))
        slots = _slots(rng)
        texts.append(("user", USER_TEMPLATES[topic].format(**slots)))
        texts.append(("assistant", ASSISTANT_TEMPLATES[topic].format(**slots)))
    return texts[:count]


def openai_messages(count, seed=11):
    """The corpus as OpenAI chat dicts, the shape agents hand to both memorylab and its peers."""
    return [{"role": role, "content": text} for role, text in conversation_texts(count, seed)]


def kv_values(count, seed=13):
    """(key, value) pairs like an agent's business state: carts, preferences, flags."""
    rng = random.Random(seed)
    pairs = []
    for i in range(count):
        value = {
            "customer": rng.choice(PEOPLE),
            "city": rng.choice(CITIES),
            "cart": [{"sku": f"SKU-{rng.randrange(10000)}", "qty": rng.randrange(1, 4)}
                     for _ in range(rng.randrange(1, 4))],
            "vip": rng.random() < 0.1,
            "visits": i,
        }
        pairs.append((f"customer:{i}:state", value))
    return pairs
