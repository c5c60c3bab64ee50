"""OTLP spans → trace.v1 documents, for the trace loop's intake (Kafka ``otlp_proto``/``otlp_json`` input and the
OTLP/HTTP receiver alike).

    otlp.py           OTLP protobuf/JSON → spans
    otlp_assembly.py  spans of one trace buffered by trace id (waiting for the root up to the longest query, bounded
                      memory), late spans repaired, a rootless trace dead-lettered, each trace's final outcome
    openinference.py  OpenInference spans of one trace → a trace.v1 document, or why it is not a query
    openinference_texts.py, openinference_documents.py  its question/answer texts, its chunks
    conventions.py    which convention a span follows; the span as the mapping reads it (OpenInference attributes)
    openllmetry.py    OpenLLMetry's traceloop.* spans (retrievers, rerankers, inputs and outputs) read as OpenInference
    genai.py          GenAI semantic-convention gen_ai.* spans (model calls, retrieval, workflows, tools whose result is
                      documents) read as OpenInference
    pydantic_ai.py    Pydantic AI's agent runs (pydantic_ai.all_messages, final_result): the question and the answer

Must not store, commit or talk to a network.
"""
