"""`ticketsim serve`: one small search page over a Searcher: a query form, the ranked tickets with their solution and
the reasons each was found. A GET form, so a search is a link; bad input is answered on the page with a 400."""
from __future__ import annotations

import polars as pl
from flask import Flask, render_template_string, request

from ticketsim.data.validate import DataError
from ticketsim.search.searcher import Searcher

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ticketsim search</title>
<style>
 body { font-family: sans-serif; max-width: 60rem; margin: 1.5rem auto; color: #222; }
 form { display: grid; grid-template-columns: 7rem 1fr; gap: .4rem; }
 textarea { height: 4rem; } .error, .note { padding: .5rem; } .error { background: #fdd; } .note { background: #ffd; }
 ol { padding-left: 1.5rem; } li { margin: .8rem 0; } .score { font-weight: bold; } .why { color: #555; font-size: .9rem; }
 pre { white-space: pre-wrap; background: #f4f4f4; padding: .4rem; margin: .3rem 0; }
</style></head><body>
<h1>Search the knowledge base</h1>
<form method="get" action="/">
 <label for="subject">Subject</label><input id="subject" name="subject" value="{{ subject }}">
 <label for="description">Description</label><textarea id="description" name="description">{{ description }}</textarea>
 <label for="k">Tickets</label><input id="k" name="k" type="number" min="1" value="{{ k }}">
 <span></span><button type="submit">Search</button>
</form>
{% if error %}<p class="error" role="alert">{{ error }}</p>{% endif %}
{% if answer %}
 {% for note in answer.warnings %}<p class="note">{{ note }}</p>{% endfor %}
 <ol id="results">
 {% set similarities = answer.similarities() %}
 {% for hit in answer.hits %}
  <li class="hit" data-ticket="{{ hit.ticket_id }}"><span class="score">{{ "%.2f"|format(hit.calibrated) }}</span> / 5
   <span class="similarity" title="the model's raw similarity g, which orders equal scores">g {{ similarities[loop.index0] }}</span>
   &nbsp; <b>{{ hit.ticket_id }}</b> {{ hit.subject }}
   <pre class="solution">{{ hit.solution }}</pre>
   <div class="why">why:
    {% for part in hit.reasons.parts %}<div class="part">query {{ part.query }} ~ ticket {{ part.ticket }}:
     <span class="phrases">{{ part.phrases|join(", ") }}</span></div>{% else %}no shared words{% endfor %}
    {% if hit.reasons.topics %}<div class="topics">topics:
     {% for topic in hit.reasons.topics %}#{{ topic.topic }} ({{ topic.words|join(" ") }}){{ ", " if not loop.last }}{% endfor %}
    </div>{% endif %}
   </div></li>
 {% endfor %}
 </ol>
{% endif %}
</body></html>
"""


def create_app(searcher: Searcher) -> Flask:
    app = Flask("ticketsim")

    @app.get("/")
    def page():
        subject, description = request.args.get("subject", ""), request.args.get("description", "")
        k, answer, error = request.args.get("k", "10"), None, None
        if "subject" in request.args or "description" in request.args:
            try:
                if not k.strip().isdigit():
                    raise DataError([f"tickets: {k!r} is not a whole number"])
                query = pl.DataFrame({"query_id": ["1"], "subject": [subject], "description": [description]})
                answer = searcher.search(query, int(k))[0]
            except DataError as bad:
                error = "; ".join(bad.problems)
        html = render_template_string(PAGE, subject=subject, description=description, k=k, answer=answer, error=error)
        return html, 400 if error else 200

    @app.get("/health")
    def health():
        return "ok"

    return app
