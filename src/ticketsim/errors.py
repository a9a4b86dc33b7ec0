"""The failures `ticketsim` tells apart by exit code, and the codes: importable without the heavy modules that raise them."""

OK = 0
FAILED = 1       # the quality gate failed (gate, retrain)
ERROR = 2        # a step could not run: bad params file, tracking server unreachable, dvc failed, data not overwritten (and usage errors)
BAD_INPUT = 65   # EX_DATAERR: input refused (any DataError), each problem as file:line; nothing was written
BUG = 70         # EX_SOFTWARE: an unexpected exception, a bug in ticketsim: its traceback, then a line saying so
PIPE_CLOSED = 141  # 128 + SIGPIPE: the reader of the output closed it (`| head`), as a shell tool ends


class Terminated(BaseException):
    """SIGTERM stopped the process (raised in its main thread by ticketsim.side_by_side, as Ctrl-C raises
    KeyboardInterrupt): it unwinds, closing runs and killing workers, and the command line ends with `status`, the
    shell's status for the signal. Not an Exception, so that no `except Exception` stops it."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum}")
        self.status = 128 + signum


class StepError(RuntimeError):
    """A step could not run (a tracking server that does not answer, a failed `dvc` call): not bad input, not a bug."""
