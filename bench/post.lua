-- wrk script: POST the JSON in $BODY (with its content type) to the URL wrk was given.
wrk.method = "POST"
wrk.body = os.getenv("BODY") or "{}"
wrk.headers["Content-Type"] = os.getenv("CONTENT_TYPE") or "application/json"
