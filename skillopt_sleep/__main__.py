from skillopt_sleep.cli import main

main()
