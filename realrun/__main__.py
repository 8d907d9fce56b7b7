from realrun.cli import main
from realrun.launch.finish import exit_now

exit_now(main())   # os._exit after a flush: torch's interpreter teardown is slow (finish.py)
