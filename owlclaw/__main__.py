from owlclaw.cli import main

main()
