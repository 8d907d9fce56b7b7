from realrun.cli import main

raise SystemExit(main())
