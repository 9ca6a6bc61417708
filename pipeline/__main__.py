"""``python -m pipeline`` is the ``tracereplay`` command."""

from pipeline.cli import main

main()
