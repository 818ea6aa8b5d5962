"""``python -m cpsched.cli``: the same as the ``cpsched`` command."""

from cpsched.cli import main

main()
