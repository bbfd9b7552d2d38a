from bot.cli import main

main(prog_name="kept")
