"""Adds our commands to spaCy's CLI as ``python -m spacy structpref-COMMAND``.

Loaded through the ``spacy_cli`` entry point, which spaCy imports when its CLI
starts; importing the module is what registers the commands."""
from spacy.cli._util import app as spacy_app

from . import app as structpref_app

for command in structpref_app.registered_commands:
    spacy_app.command(f"structpref-{command.name}", help=command.callback.__doc__,
                      context_settings=command.context_settings)(command.callback)

register = structpref_app
