"""What serves people: the search page (Flask), its gunicorn workers, the MLflow pyfunc model, who may write."""
