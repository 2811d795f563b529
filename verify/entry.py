"""The ``fedverify`` console command: runs ``verify.cli.main``, and turns a Ctrl-C that lands
while the command line itself is still being imported into the same one line as any other
interrupt ("fedverify: interrupted", exit 130)."""
import sys


def main(argv=None) -> int:
    try:
        from .cli import main as run

        return run(argv)
    except KeyboardInterrupt:
        try:
            sys.stderr.write("fedverify: interrupted\n")
        except (OSError, ValueError):
            pass
        return 130
