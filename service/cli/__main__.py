"""``python -m service.cli``: the ``annoplan`` command line."""

from service.cli import main

main()
