"""What the server and the reference runtime share, and nothing else: the output
schemas of the job types (``output_schemas``, with their JSON files under ``schemas/``),
how deep JSON may nest (``jsondepth``) and the error code names a runtime reports
(``errors``). It needs no framework (the standard library and jsonschema), so the
runtime, a program of its own (``python -m runtime_worker``), imports it without Django
or any server app (DESIGN rule 13); the server's modules re-export it where they
always had these names (``ai_jobs.output_schemas``, ``config.jsondepth``,
``config.errors.RuntimeErrorCode``)."""
