from simddp.cli import main

raise SystemExit(main())
