"""Provider batch APIs: a model's pending tasks sent as batch jobs (about half price, results
within a day) instead of one call each, with a journal in the run folder so that nothing is
submitted twice or lost (journal.py, runner.py); the wire protocols in openai.py, anthropic.py
and gemini.py, behind the small interface of api.py."""
