"""``python -m lakehouse ...``, the same as the ``lakehouse`` script."""

from lakehouse.cli import main

if __name__ == "__main__":
    main(prog_name="lakehouse")
