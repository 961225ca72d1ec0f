-- toolscout catalog schema, version 2. The first version created draft tables for the
-- logs that nothing ever wrote: toolscout_discoveries, toolscout_calls (the discovery log
-- now creates its own, with a `ts` column) and toolscout_audit (the audit log now lives in
-- the schema toolscout_audit). A draft (it has the drafts' `at` column) is dropped when
-- empty and renamed <table>_v1 when it holds rows; the logs' own tables are not touched.
DO $$
DECLARE
    t text;
    n bigint;
BEGIN
    FOREACH t IN ARRAY ARRAY['toolscout_discoveries', 'toolscout_calls', 'toolscout_audit'] LOOP
        IF EXISTS (
            SELECT 1 FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name = t AND column_name = 'at'
        ) THEN
            EXECUTE format('SELECT count(*) FROM %I', t) INTO n;
            IF n = 0 THEN
                EXECUTE format('DROP TABLE %I', t);
            ELSE
                EXECUTE format('ALTER TABLE %I RENAME TO %I', t, t || '_v1');
            END IF;
        END IF;
    END LOOP;
END $$;
