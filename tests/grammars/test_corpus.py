

@pytest.mark.slow
def test_bounded_corpus_end_to_end_with_smollm2(smollm2_server):
    """SmolLM2 through a real server: each bounded corpus schema ends with "stop" and validates in its dialect."""
    import openai

    from engine.models import DEFAULT_MODEL_ID

    from .checking import validate_output

    client = openai.OpenAI(base_url=smollm2_server.v1, api_key="none", max_retries=0, timeout=600)
    for case in [case for case in corpus() if case.bounded]:
        response = client.chat.completions.create(
            model=DEFAULT_MODEL_ID, max_tokens=300, temperature=0,
            messages=[{"role": "user", "content": f"Write a {case.name} object as JSON."}],
            response_format={"type": "json_schema", "json_schema": {"name": case.name, "schema": case.schema}})
        choice = response.choices[0]
        assert choice.finish_reason == "stop", (case.name, choice.message.content)
        validate_output(case.schema, choice.message.content)
