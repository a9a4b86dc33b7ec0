"""`ticketsim serve`'s Flask app: the search page and its small JSON API, over one Searcher and one feedback Journal.

- `GET /`: a query form (GET, so a search is a link) with a filter box per facet the index keeps (product, site,
  queue: only the tickets whose field holds the value, as the API's `where`; the filter in force is said above the
  hits), a legend of what the figures mean, the ranked tickets with their similarity (calibrated 1-5 where the model
  has a calibration, and the raw g), description (collapsed), solution and the reasons each was found, and per hit the
  buttons "solved it" (YES), "related" (REL), "not relevant" (NO), which post to `/feedback`; a judgment taken is
  answered by a redirect to the page (POST-redirect-GET: a reload sends nothing again) with what became of it as a
  notice the server signed (a link's own notice is not shown), a refused one on the page with its status;
- `GET /api/search?subject=&description=&k=[&full=1][&where=product=pump ...]`: the same answer as JSON (full=1: the
  tickets' texts whole, not excerpts; each `where`, FIELD=VALUE, a filter all hits hold, as `ticketsim search
  --where`); `POST /api/feedback` (JSON: subject, description, ticket_id, label): one judgment, answered once it is on
  disk (ticketsim.data.feedback);
- `GET /health`: ok.
Bad input is a 400 with the problems; k, the query's text and request bodies are bounded (params serve). Writing
feedback needs the token when the server has one, and always off loopback (Access); a cross-site POST is refused.
Every text is escaped on the page (Jinja autoescape): a ticket is data, never markup. ticketsim.app.worker runs it on gunicorn.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from urllib.parse import urlencode, urlsplit

import polars as pl
from flask import Flask, jsonify, redirect, request

from ticketsim.app.access import Access, is_loopback
from ticketsim.config import ServeConfig
from ticketsim.data.feedback import Journal, Judgment
from ticketsim.data.tables import FACETS
from ticketsim.data.validate import DataError
from ticketsim.errors import StepError
from ticketsim.search.searcher import EXCERPT, Answer, Searcher

COOKIE = "ticketsim_token"
JUDGMENTS = {"YES": "solved it", "REL": "related", "NO": "not relevant"}
STATUS = {"recorded": 200, "repeated": 200, "conflict": 409}


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ticketsim search</title>
<style>
 body { font-family: sans-serif; max-width: 60rem; margin: 1.5rem auto; color: #222; }
 form { display: grid; grid-template-columns: 7rem 1fr; gap: .4rem; }
 textarea { height: 4rem; } .error, .note { padding: .5rem; } .error { background: #fdd; } .note { background: #ffd; }
 ol { padding-left: 1.5rem; } li { margin: .8rem 0; } .score { font-weight: bold; } .why { color: #555; font-size: .9rem; }
 pre { white-space: pre-wrap; background: #f4f4f4; padding: .4rem; margin: .3rem 0; }
 .judge, .token { display: block; margin-top: .3rem; }
 .judge button.chosen { font-weight: bold; outline: 2px solid #484; } .token { margin: .5rem 0; }
 .legend { color: #555; font-size: .9rem; border-left: 3px solid #ccc; padding-left: .5rem; }
 details.description summary { cursor: pointer; color: #555; }
</style></head><body>
{% macro query() -%}
 <input type="hidden" name="subject" value="{{ subject }}"><input type="hidden" name="description" value="{{ description }}">
 <input type="hidden" name="k" value="{{ k }}">
 {%- for field, value in filters.items() %}<input type="hidden" name="{{ field }}" value="{{ value }}">{% endfor %}
{%- endmacro %}
<h1>Search the knowledge base</h1>
<form method="get" action="/">
 <label for="subject">Subject</label><input id="subject" name="subject" value="{{ subject }}">
 <label for="description">Description</label><textarea id="description" name="description">{{ description }}</textarea>
 <label for="k">Tickets</label><input id="k" name="k" type="number" min="1" value="{{ k }}">
 {% for field in facets %}<label for="where-{{ field }}">{{ field|capitalize }}</label><input id="where-{{ field }}"
  name="{{ field }}" value="{{ filters.get(field, "") }}" placeholder="any (only the tickets whose {{ field }} is this)">
 {% endfor -%}
 <span></span><button type="submit">Search</button>
</form>
{% if error %}<p class="error" role="alert">{{ error }}</p>{% endif %}
{% if notice %}<p class="note" id="notice" role="status">{{ notice }}</p>{% endif %}
{% if ask_token %}
<form class="token" method="post" action="/token">
 <label for="token">Feedback on this server needs its token</label> <input id="token" name="token" type="password">
 {{ query() }}<button type="submit">Use it</button>
</form>
{% endif %}
{% if answer %}
 {% if answer.matching is not none %}<p class="filter" id="filter">Only the tickets with
  {% for field, value in filters.items() %}{{ field }} = {{ value }}{{ " and " if not loop.last }}{% endfor %}:
  {{ answer.matching }} of {{ tickets }}</p>{% endif %}
 {% for note in answer.warnings %}<p class="note">{{ note }}</p>{% endfor %}
 <p class="legend" id="legend">{{ answer.legend }}</p>
 <ol id="results">
 {% set similarities = answer.similarities() %}
 {% for hit in answer.hits %}
  <li class="hit" data-ticket="{{ hit.ticket_id }}">
   {%- if answer.calibrated %}<span class="score">score {{ "%.2f"|format(hit.calibrated) }} / 5</span> {% endif -%}
   <span class="similarity">g {{ similarities[loop.index0] }}</span>
   &nbsp; <b>{{ hit.ticket_id }}</b> {{ hit.subject }}
   <details class="description"><summary>description</summary><pre>{{ hit.description }}</pre></details>
   <pre class="solution">{{ hit.solution }}</pre>
   {% for part, length in hit.cut.items() %}<span class="cut">{{ part }}: the first {{ excerpt }} of {{ length }} characters
    (all: the JSON API with full=1)</span> {% endfor %}
   <div class="why">why:
    {% for part in hit.reasons.parts %}<div class="part">query {{ part.query }} ~ ticket {{ part.ticket }}:
     <span class="phrases">{{ part.phrases|join(", ") }}</span></div>{% else %}no shared words{% endfor %}
    {% if hit.reasons.topics %}<div class="topics">topics:
     {% for topic in hit.reasons.topics %}#{{ topic.topic }} ({{ topic.words|join(" ") }}){{ ", " if not loop.last }}{% endfor %}
    </div>{% endif %}
   </div>
   <form class="judge" method="post" action="/feedback">
    {{ query() }}<input type="hidden" name="ticket_id" value="{{ hit.ticket_id }}">
    {% for label, text in judgments.items() %}<button type="submit" name="label" value="{{ label }}"
     {%- if judged == (hit.ticket_id, label) %} class="chosen"{% endif %}>{{ text }}</button> {% endfor %}
   </form></li>
 {% endfor %}
 </ol>
{% endif %}
</body></html>
"""


def create_app(searcher: Searcher, settings: ServeConfig = ServeConfig(), journal: Journal | None = None,
               access: Access = Access("127.0.0.1", None)) -> Flask:
    """The app; by default as `ticketsim serve` without a params file: loopback, no token, the journal serve.feedback."""
    journal = journal or Journal(settings.feedback)
    app = Flask("ticketsim")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_bytes
    template = app.jinja_env.from_string(PAGE)     # once: compiling it took longer than a small search (render_template_string)

    @app.before_request
    def follow_index() -> None:
        """Between requests, not within one: tickets `ticketsim index add` wrote are found and can be judged at once."""
        try:
            searcher.follow()
        except StepError as refused:    # e.g. rebuilt with another bundle's weights: keep answering from the one loaded
            app.logger.warning("%s", refused)

    def query_of(values) -> tuple[str, str, str]:
        """subject, description and k as typed (a browser sends a textarea's line breaks as CRLF)."""
        text = [values.get(name, "").replace("\r\n", "\n") for name in ("subject", "description")]
        return text[0], text[1], values.get("k", "10")

    def filters_of(values) -> dict[str, str]:
        """The page's filter boxes as typed: field -> value, the empty ones left out."""
        return {field: values[field].strip() for field in FACETS if values.get(field, "").strip()}

    def too_long(subject: str, description: str) -> list[str]:
        n = len(subject) + len(description)
        return [f"the query has {n} characters; at most {settings.max_text} are read"] if n > settings.max_text else []

    def search(subject: str, description: str, k: str, full: bool = False, where: list[str] = ()) -> Answer:
        """The answer of one query (`full`: the tickets' texts whole, not excerpts; `where`: FIELD=VALUE filters, all
        of which a ticket must hold), or a DataError for bad input (k not a number or out of bounds, the text too long,
        a filter not FIELD=VALUE or on a field the index lacks)."""
        problems, digits = too_long(subject, description), k.strip()
        filters = dict(f.partition("=")[::2] for f in where)
        problems += [f"where: {f[:40]!r} is not FIELD=VALUE, as product=pump" for f in where if "=" not in f or not f.split("=")[0]]
        # ASCII digits only ("²" is a digit to isdigit, not to int), and few of them (int() refuses 4,300 and more)
        if not re.fullmatch(r"[0-9]{1,9}", digits) or not 1 <= int(digits) <= settings.max_k:
            problems.append(f"tickets: {k[:20]!r} is not a whole number from 1 to {settings.max_k}")
        if problems:
            raise DataError(problems)
        try:
            return searcher.search(pl.DataFrame({"query_id": ["1"], "subject": [subject], "description": [description]}),
                                   int(digits), full, filters)[0]
        except StepError as lacking:    # a field the index lacks: the request's fault, said as the CLI says it
            raise DataError([str(lacking)]) from None

    def page(subject: str, description: str, k: str, notice: str | None = None, error: str | None = None,
             judged: tuple[str, str] | None = None, status: int = 200):
        """The page for the query and the filter boxes of the request (a field the index lacks: the error line)."""
        answer, filters = None, filters_of(request.values)
        if "subject" in request.values or "description" in request.values:
            try:
                answer = search(subject, description, k, where=[f"{field}={value}" for field, value in filters.items()])
            except DataError as bad:
                error, status = "; ".join(bad.problems), 400
        html = template.render(subject=subject, description=description, k=k, answer=answer, error=error, notice=notice,
                               judged=judged, judgments=JUDGMENTS, excerpt=f"{EXCERPT:,}", facets=searcher.index.facets(),
                               filters=filters, tickets=f"{len(searcher.index):,}",
                               ask_token=access.token is not None and access.refusal(request.cookies.get(COOKIE)) is not None)
        return html, status

    def cross_site() -> bool:
        """A POST another site's page made the browser send (its Origin is not this server)."""
        origin = request.headers.get("Origin")
        return origin is not None and urlsplit(origin).netloc != request.host

    def judge(values, via: str, given: str | None) -> tuple[int, dict]:
        """Record one judgment; (HTTP status, what became of it or why not)."""
        refused = access.refusal(given)
        if refused:
            return 401, {"problems": [refused]}
        if not access.needs_token and not is_loopback(urlsplit(f"//{request.host}").hostname or ""):
            # A page elsewhere whose name was made to resolve to 127.0.0.1 (DNS rebinding) is same-origin to itself.
            return 401, {"problems": [f"feedback without a token is taken for this machine's own names only, not {request.host!r}"]}
        subject, description, _ = query_of(values)
        judgment = Judgment(subject, description, str(values.get("ticket_id", "")), str(values.get("label", "")), via)
        if too_long(subject, description):
            return 400, {"problems": too_long(subject, description)}
        try:
            recorded = journal.record(judgment, searcher.ticket(judgment.ticket_id), datetime.now(timezone.utc))
        except DataError as bad:
            return 400, {"problems": bad.problems}
        return STATUS[recorded.status], recorded.as_dict()

    @app.get("/")
    def search_page():
        judged = (request.args["judged"], request.args.get("label", "")) if "judged" in request.args else None
        notice = request.args.get("notice", "")     # shown only as this server's own redirect wrote it: signed
        return page(*query_of(request.args), notice=notice if access.signs(notice, request.args.get("signed", "")) else None,
                    judged=judged)

    @app.post("/feedback")
    def feedback_form():
        if cross_site():
            return "refused: a form of another site posted here", 403
        status, outcome = judge(request.form, "page", request.cookies.get(COOKIE))
        if "message" not in outcome:    # refused (nothing written): said on the page, with the status
            return page(*query_of(request.form), error="; ".join(outcome.get("problems", [])), status=status)
        # Taken (recorded, repeated, kept apart): the page again by GET, so reloading it sends nothing a second time.
        subject, description, k = query_of(request.form)
        shown = {"subject": subject, "description": description, "k": k, **filters_of(request.form),
                 "notice": outcome["message"], "signed": access.signature(outcome["message"])}
        if status == 200:   # the button the agent chose is marked; a conflict marks none (the first label stands)
            shown |= {"judged": request.form.get("ticket_id", ""), "label": request.form.get("label", "")}
        return redirect("/?" + urlencode(shown), code=303)

    @app.post("/token")
    def token_form():
        if cross_site():
            return "refused: a form of another site posted here", 403
        given = request.form.get("token", "")
        if access.token is None or access.refusal(given):
            return page(*query_of(request.form), error="that is not this server's feedback token", status=401)
        subject, description, k = query_of(request.form)
        response = redirect("/?" + urlencode({"subject": subject, "description": description, "k": k,
                                              **filters_of(request.form)}), code=303)
        response.set_cookie(COOKIE, given, httponly=True, samesite="Strict", secure=request.is_secure)
        return response

    @app.get("/api/search")
    def search_api():
        try:
            return jsonify(search(*query_of(request.args), full=request.args.get("full", "") in ("1", "true"),
                                  where=request.args.getlist("where")).as_dict())
        except DataError as bad:
            return jsonify(problems=bad.problems), 400

    @app.post("/api/feedback")
    def feedback_api():
        values = request.get_json(silent=True)
        if not isinstance(values, dict):    # also what keeps other sites out: their forms cannot send JSON
            return jsonify(problems=["expected a JSON object: subject, description, ticket_id, label (YES/REL/NO)"]), 400
        bearer = request.headers.get("Authorization", "")
        given = bearer.removeprefix("Bearer ").strip() if bearer.startswith("Bearer ") else request.cookies.get(COOKIE)
        status, outcome = judge({key: str(value) for key, value in values.items()}, "api", given)
        return jsonify(outcome), status

    @app.get("/health")
    def health():
        return "ok"

    return app
