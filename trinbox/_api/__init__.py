"""The declaration API: what a service writes to say what it handles and how. Queues and their
settings, the ``subscriber`` decorator and the handler rules it checks, outcomes, failure
policies, backoff, codecs, how a handler is called, the context keys' handles, and the event
records with the ``Events`` hook. Nothing here runs a claim or opens a connection."""
