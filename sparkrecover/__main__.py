from sparkrecover.cli import main

main()
