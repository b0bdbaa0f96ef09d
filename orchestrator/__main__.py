from orchestrator.cli.main import app

app(prog_name="orchestrator")
