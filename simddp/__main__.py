from simddp.cli.main import main

raise SystemExit(main())
