-- toolscout catalog schema, version 1. Portable: PostgreSQL >= 15, pgvector >= 0.5.
CREATE EXTENSION IF NOT EXISTS vector;

-- one row: the catalog generation, bumped by every write transaction (its row lock
-- also serialises writers)
CREATE TABLE IF NOT EXISTS toolscout_state (
    id integer PRIMARY KEY CHECK (id = 1),
    generation bigint NOT NULL
);
INSERT INTO toolscout_state (id, generation) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;

CREATE TABLE IF NOT EXISTS toolscout_tools (
    id text PRIMARY KEY,
    seq bigserial UNIQUE,                 -- insertion order
    card jsonb NOT NULL,
    parameters jsonb NOT NULL,
    output_schema jsonb,
    fields jsonb NOT NULL,                -- pre-normalised lexical fields
    content_hash text NOT NULL,
    generation bigint NOT NULL,           -- generation of the last write to this row
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS toolscout_tools_generation ON toolscout_tools (generation);

-- tools removed, so replicas can drop them without reloading everything
CREATE TABLE IF NOT EXISTS toolscout_tombstones (
    id text PRIMARY KEY,
    generation bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS toolscout_tombstones_generation ON toolscout_tombstones (generation);

-- embeddings by content hash: a text embedded once is never embedded again
CREATE TABLE IF NOT EXISTS toolscout_vectors (
    text_hash text NOT NULL,
    model_id text NOT NULL,
    embedding vector(384) NOT NULL,
    PRIMARY KEY (text_hash, model_id)
);

-- the embedded texts each tool owns, with a copy of the vector for the ANN index
CREATE TABLE IF NOT EXISTS toolscout_tool_texts (
    tool_id text NOT NULL REFERENCES toolscout_tools (id) ON DELETE CASCADE,
    kind text NOT NULL,
    text_hash text NOT NULL,
    model_id text NOT NULL,
    embedding vector(384) NOT NULL,
    PRIMARY KEY (tool_id, kind, text_hash, model_id)
);
CREATE INDEX IF NOT EXISTS toolscout_tool_texts_hnsw
    ON toolscout_tool_texts USING hnsw (embedding vector_cosine_ops);

CREATE TABLE IF NOT EXISTS toolscout_meta (
    key text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE IF NOT EXISTS toolscout_learned_aliases (
    tool_id text NOT NULL,
    phrase text NOT NULL,
    uses integer NOT NULL,
    PRIMARY KEY (tool_id, phrase)
);
