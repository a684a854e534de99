"""A scripted generator and two scripted solvers for ``bench synth`` on the ``ecommerce``
toolset (``function:`` providers: docs/providers.md). Each generation request's header line
(``Request N: kind K, language L, tool T...``, from the built-in templates) picks a scripted
proposal; the script is made so that each rejection reason of the synthesis report occurs
(see ``EXPECTED_REASONS``)."""

import re

HEADER = re.compile(r"Request (\d+): kind (\w+), language (\w+)")

W = "propose_call_case"
N = "propose_no_call_case"
A = "propose_ask_case"

#: (kind, request number) -> the generator's answer (a list of calls, or prose)
SCRIPT = {
    ("single", 1): [{"name": W, "arguments": {
        "query": "What will the weather be like in Chengdu?",
        "calls": [{"name": "get_weather", "arguments": {"city": "Chengdu"}}]}}],
    ("single", 2): [{"name": W, "arguments": {  # a description example, word for word
        "query": "Show the coupons I already used",
        "calls": [{"name": "list_coupons", "arguments": {"status": "used"}}]}}],
    ("single", 3): [{"name": W, "arguments": {  # no such order in the shop's database
        "query": "Did the payment for ORD99999999 go through?",
        "calls": [{"name": "get_order_status", "arguments": {"order_id": "ORD99999999"}}]}}],
    ("multiple", 1): [{"name": W, "arguments": {
        "query": "What's my points total, and which vouchers are still valid?",
        "calls": [{"name": "get_points_balance", "arguments": {}},
                  {"name": "list_coupons", "arguments": {}}]}}],
    ("multiple", 2): [{"name": W, "arguments": {  # one call: not the multiple kind
        "query": "List my vouchers please",
        "calls": [{"name": "list_coupons", "arguments": {}}]}}],
    ("multiple", 3): [{"name": W, "arguments": {  # "unused" is outside the enum
        "query": "Points total plus my unused vouchers",
        "calls": [{"name": "get_points_balance", "arguments": {}},
                  {"name": "list_coupons", "arguments": {"status": "unused"}}]}}],
    ("parallel", 1): [{"name": W, "arguments": {
        "query": "Compare tomorrow's forecast for Harbin and Hangzhou",
        "calls": [{"name": "get_weather", "arguments": {"city": "Harbin"}},
                  {"name": "get_weather", "arguments": {"city": "Hangzhou"}}]}}],
    ("parallel", 2): [{"name": W, "arguments": {  # near-duplicate of single 1
        "query": "What will the weather be like in Chengdu and Wuhan?",
        "calls": [{"name": "get_weather", "arguments": {"city": "Chengdu"}},
                  {"name": "get_weather", "arguments": {"city": "Wuhan"}}]}}],
    ("parallel", 3): [{"name": W, "arguments": {  # no query: fails the pydantic model
        "calls": [{"name": "get_weather", "arguments": {"city": "Lhasa"}}]}}],
    ("no_call", 1): [{"name": N, "arguments": {
        "query": "Can you recommend a good novel for my holiday?", "reason": "out_of_scope"}}],
    ("no_call", 2): [{"name": N, "arguments": {  # Chinese, though English was asked
        "query": "今天心情不错，给我讲个笑话吧", "reason": "out_of_scope"}}],
    ("no_call", 3): [{"name": N, "arguments": {  # the solvers disagree on it
        "query": "I want to buy something nice", "reason": "out_of_scope"}}],
    ("ask", 1): [{"name": A, "arguments": {
        "query": "Please cancel my order, I changed my mind.", "tool": "cancel_order",
        "missing": ["order_id"]}}],
    ("ask", 2): [{"name": A, "arguments": {  # reason is optional: nothing needs asking
        "query": "Cancel order ORD20261101 for me", "tool": "cancel_order",
        "missing": ["reason"]}}],
    ("ask", 3): "Sorry, I cannot think of a request.",  # prose, no proposal
}

#: The rejection reason each scripted request ends with (None: kept).
EXPECTED_REASONS = {
    ("single", 1): None, ("single", 2): "leak", ("single", 3): "execution",
    ("multiple", 1): None, ("multiple", 2): "kind", ("multiple", 3): "schema",
    ("parallel", 1): None, ("parallel", 2): "duplicate", ("parallel", 3): "format",
    ("no_call", 1): None, ("no_call", 2): "language", ("no_call", 3): "unsolvable",
    ("ask", 1): None, ("ask", 2): "kind", ("ask", 3): "format",
}

#: What a solver answers to each query that reaches it.
SOLUTIONS = {
    "What will the weather be like in Chengdu?": [
        {"name": "get_weather", "arguments": {"city": "Chengdu"}}],
    "Did the payment for ORD99999999 go through?": [
        {"name": "get_order_status", "arguments": {"order_id": "ORD99999999"}}],
    "What's my points total, and which vouchers are still valid?": [
        {"name": "get_points_balance", "arguments": {}}, {"name": "list_coupons",
                                                          "arguments": {}}],
    "Compare tomorrow's forecast for Harbin and Hangzhou": [
        {"name": "get_weather", "arguments": {"city": "Harbin"}},
        {"name": "get_weather", "arguments": {"city": "Hangzhou", "unit": "celsius"}}],
    "Can you recommend a good novel for my holiday?": [],
    "I want to buy something nice": [],
    "Please cancel my order, I changed my mind.": {
        "tool_calls": [], "text": "Which order should I cancel? Please give the order id."},
}


def generator(messages, tools, trial):
    """The scripted generator: the answer for the request's kind and number."""
    header = HEADER.search(messages[-1].content)
    return SCRIPT[(header.group(2), int(header.group(1)))]


def solver_a(messages, tools, trial):
    """Answers each query as ``SOLUTIONS`` says."""
    return SOLUTIONS.get(messages[-1].content, [])


def solver_b(messages, tools, trial):
    """As :func:`solver_a`, except that it searches products for the vague shopping wish."""
    query = messages[-1].content
    if query == "I want to buy something nice":
        return [{"name": "search_products", "arguments": {"keyword": "gift"}}]
    return SOLUTIONS.get(query, [])
