PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE IF NOT EXISTS "_llm_migrations" (
   "name" TEXT PRIMARY KEY,
   "applied_at" TEXT
);
INSERT INTO _llm_migrations VALUES('m001_initial','2026-12-01 01:41:35.765879+00:00');
INSERT INTO _llm_migrations VALUES('m002_id_primary_key','2026-12-01 01:41:35.776197+00:00');
INSERT INTO _llm_migrations VALUES('m003_chat_id_foreign_key','2026-12-01 01:41:35.798514+00:00');
INSERT INTO _llm_migrations VALUES('m004_column_order','2026-12-01 01:41:35.810573+00:00');
INSERT INTO _llm_migrations VALUES('m004_drop_provider','2026-12-01 01:41:35.821095+00:00');
INSERT INTO _llm_migrations VALUES('m005_debug','2026-12-01 01:41:35.833545+00:00');
INSERT INTO _llm_migrations VALUES('m006_new_logs_table','2026-12-01 01:41:35.858754+00:00');
INSERT INTO _llm_migrations VALUES('m007_finish_logs_table','2026-12-01 01:41:35.874376+00:00');
INSERT INTO _llm_migrations VALUES('m008_reply_to_id_foreign_key','2026-12-01 01:41:35.890025+00:00');
INSERT INTO _llm_migrations VALUES('m008_fix_column_order_in_logs','2026-12-01 01:41:35.901794+00:00');
INSERT INTO _llm_migrations VALUES('m009_delete_logs_table_if_empty','2026-12-01 01:41:35.906651+00:00');
INSERT INTO _llm_migrations VALUES('m010_create_new_log_tables','2026-12-01 01:41:35.916637+00:00');
INSERT INTO _llm_migrations VALUES('m011_fts_for_responses','2026-12-01 01:41:35.935217+00:00');
INSERT INTO _llm_migrations VALUES('m012_attachments_tables','2026-12-01 01:41:35.943088+00:00');
INSERT INTO _llm_migrations VALUES('m013_usage','2026-12-01 01:41:35.951212+00:00');
INSERT INTO _llm_migrations VALUES('m014_schemas','2026-12-01 01:41:36.005557+00:00');
INSERT INTO _llm_migrations VALUES('m015_fragments_tables','2026-12-01 01:41:36.036427+00:00');
INSERT INTO _llm_migrations VALUES('m016_fragments_table_pks','2026-12-01 01:41:36.058202+00:00');
INSERT INTO _llm_migrations VALUES('m017_tools_tables','2026-12-01 01:41:36.096482+00:00');
INSERT INTO _llm_migrations VALUES('m017_tools_plugin','2026-12-01 01:41:36.102736+00:00');
INSERT INTO _llm_migrations VALUES('m018_tool_instances','2026-12-01 01:41:36.132645+00:00');
INSERT INTO _llm_migrations VALUES('m019_resolved_model','2026-12-01 01:41:36.140637+00:00');
INSERT INTO _llm_migrations VALUES('m020_tool_results_attachments','2026-12-01 01:41:36.145739+00:00');
INSERT INTO _llm_migrations VALUES('m021_tool_results_exception','2026-12-01 01:41:36.149770+00:00');
CREATE TABLE IF NOT EXISTS "conversations" (
   "id" TEXT PRIMARY KEY,
   "name" TEXT,
   "model" TEXT
);
INSERT INTO conversations VALUES('01m8qm7d8qmneqt6q8nsp4trtf','Hello there','canned');
CREATE TABLE IF NOT EXISTS "attachments" (
   "id" TEXT PRIMARY KEY,
   "type" TEXT,
   "path" TEXT,
   "url" TEXT,
   "content" BLOB
);
CREATE TABLE IF NOT EXISTS "prompt_attachments" (
   "response_id" TEXT REFERENCES "responses"("id"),
   "attachment_id" TEXT REFERENCES "attachments"("id"),
   "order" INTEGER,
   PRIMARY KEY ("response_id", "attachment_id")
);
CREATE TABLE IF NOT EXISTS "schemas" (
   "id" TEXT PRIMARY KEY,
   "content" TEXT
);
CREATE TABLE IF NOT EXISTS "responses" (
   "id" TEXT PRIMARY KEY,
   "model" TEXT,
   "prompt" TEXT,
   "system" TEXT,
   "prompt_json" TEXT,
   "options_json" TEXT,
   "response" TEXT,
   "response_json" TEXT,
   "conversation_id" TEXT REFERENCES "conversations"("id"),
   "duration_ms" INTEGER,
   "datetime_utc" TEXT,
   "input_tokens" INTEGER,
   "output_tokens" INTEGER,
   "token_details" TEXT,
   "schema_id" TEXT REFERENCES "schemas"("id")
, "resolved_model" TEXT);
INSERT INTO responses VALUES('01m8qm7d8qmneqt6q8nsp4trtg','canned','Hello there','You are terse.',NULL,'{}','Canned answer to: Hello there',NULL,'01m8qm7d8qmneqt6q8nsp4trtf',0,'2026-12-01T01:41:36.151721+00:00',12,5,NULL,NULL,NULL);
INSERT INTO responses VALUES('01m8qm7d8wetbhdvthe3fwnwms','canned','And the weather?','You are terse.',NULL,'{}','Canned answer to: And the weather?',NULL,'01m8qm7d8qmneqt6q8nsp4trtf',0,'2026-12-01T01:41:36.156515+00:00',13,6,NULL,NULL,NULL);
INSERT INTO responses VALUES('01m8qm7d9321t8n7wevdmzds65','canned','What time is it?','You are terse.',NULL,'{}','',NULL,'01m8qm7d8qmneqt6q8nsp4trtf',0,'2026-12-01T01:41:36.163616+00:00',30,7,NULL,NULL,NULL);
INSERT INTO responses VALUES('01m8qm7d9321t8n7wevdmzds66','canned','',NULL,NULL,'{}','Canned answer to: the tool result',NULL,'01m8qm7d8qmneqt6q8nsp4trtf',0,'2026-12-01T01:41:36.163748+00:00',10,6,NULL,NULL,NULL);
CREATE TABLE IF NOT EXISTS 'responses_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO responses_fts_data VALUES(1,X'040911');
INSERT INTO responses_fts_data VALUES(10,X'000000000104040004010101020101030101040101');
INSERT INTO responses_fts_data VALUES(137438953473,X'000000400730616e737765720106010103010663616e6e65640106010102010568656c6c6f0108020101050105746865726501080301010602016f0106010104040d0d0d0d');
INSERT INTO responses_fts_data VALUES(274877906945,X'000000490430616e640208020101050304737765720206010103010663616e6e65640206010102010374686502080301010602016f0206010104010777656174686572020804010107040b0b0d0b08');
INSERT INTO responses_fts_data VALUES(412316860417,X'0000002303306973030204020174030205010474696d6503020301047768617403020204070609');
INSERT INTO responses_fts_data VALUES(549755813889,X'000000460730616e737765720406010103010663616e6e656404060101020106726573756c7404060101070103746865040601010502016f040601010403026f6c0406010106040d0d0d0a08');
CREATE TABLE IF NOT EXISTS 'responses_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO responses_fts_idx VALUES(1,X'',2);
INSERT INTO responses_fts_idx VALUES(2,X'',2);
INSERT INTO responses_fts_idx VALUES(3,X'',2);
INSERT INTO responses_fts_idx VALUES(4,X'',2);
CREATE TABLE IF NOT EXISTS 'responses_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
INSERT INTO responses_fts_docsize VALUES(1,X'0205');
INSERT INTO responses_fts_docsize VALUES(2,X'0306');
INSERT INTO responses_fts_docsize VALUES(3,X'0400');
INSERT INTO responses_fts_docsize VALUES(4,X'0006');
CREATE TABLE IF NOT EXISTS 'responses_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO responses_fts_config VALUES('version',4);
CREATE TABLE IF NOT EXISTS "fragments" (
   "id" INTEGER PRIMARY KEY,
   "hash" TEXT,
   "content" TEXT,
   "datetime_utc" TEXT,
   "source" TEXT
);
CREATE TABLE IF NOT EXISTS "fragment_aliases" (
   "alias" TEXT PRIMARY KEY,
   "fragment_id" INTEGER REFERENCES "fragments"("id")
);
CREATE TABLE IF NOT EXISTS "prompt_fragments" (
   "response_id" TEXT REFERENCES "responses"("id"),
   "fragment_id" INTEGER REFERENCES "fragments"("id"),
   "order" INTEGER,
   PRIMARY KEY ("response_id", "fragment_id", "order")
);
CREATE TABLE IF NOT EXISTS "system_fragments" (
   "response_id" TEXT REFERENCES "responses"("id"),
   "fragment_id" INTEGER REFERENCES "fragments"("id"),
   "order" INTEGER,
   PRIMARY KEY ("response_id", "fragment_id", "order")
);
CREATE TABLE IF NOT EXISTS "tools" (
   "id" INTEGER PRIMARY KEY,
   "hash" TEXT,
   "name" TEXT,
   "description" TEXT,
   "input_schema" TEXT
, "plugin" TEXT);
INSERT INTO tools VALUES(1,'9854d0da84a552ee4c868eed8759f78eac5b4605e42634b9cb8b89579abd8875','clock','The time in a zone.','{"properties": {"zone": {"type": "string"}}, "required": ["zone"], "type": "object"}',NULL);
CREATE TABLE IF NOT EXISTS "tool_responses" (
   "tool_id" INTEGER REFERENCES "tools"("id"),
   "response_id" TEXT REFERENCES "responses"("id"),
   PRIMARY KEY ("tool_id", "response_id")
);
INSERT INTO tool_responses VALUES(1,'01m8qm7d9321t8n7wevdmzds65');
INSERT INTO tool_responses VALUES(1,'01m8qm7d9321t8n7wevdmzds66');
CREATE TABLE IF NOT EXISTS "tool_calls" (
   "id" INTEGER PRIMARY KEY,
   "response_id" TEXT REFERENCES "responses"("id"),
   "tool_id" INTEGER REFERENCES "tools"("id"),
   "name" TEXT,
   "arguments" TEXT,
   "tool_call_id" TEXT
);
INSERT INTO tool_calls VALUES(1,'01m8qm7d9321t8n7wevdmzds65',1,'clock','{"zone": "UTC"}','call_1');
CREATE TABLE IF NOT EXISTS "tool_instances" (
   "id" INTEGER PRIMARY KEY,
   "plugin" TEXT,
   "name" TEXT,
   "arguments" TEXT
);
CREATE TABLE IF NOT EXISTS "tool_results" (
   "id" INTEGER PRIMARY KEY,
   "response_id" TEXT REFERENCES "responses"("id"),
   "tool_id" INTEGER REFERENCES "tools"("id"),
   "name" TEXT,
   "output" TEXT,
   "tool_call_id" TEXT,
   "instance_id" INTEGER REFERENCES "tool_instances"("id")
, "exception" TEXT);
INSERT INTO tool_results VALUES(1,'01m8qm7d9321t8n7wevdmzds66',1,'clock','12:00 UTC','call_1',NULL,NULL);
PRAGMA writable_schema=ON;
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','responses_fts','responses_fts',0,'CREATE VIRTUAL TABLE "responses_fts" USING FTS5 (
    "prompt", "response",
    content="responses"
)');
CREATE TABLE IF NOT EXISTS "tool_results_attachments" (
   "tool_result_id" INTEGER REFERENCES "tool_results"("id"),
   "attachment_id" TEXT REFERENCES "attachments"("id"),
   "order" INTEGER,
   PRIMARY KEY ("tool_result_id", "attachment_id")
);
CREATE UNIQUE INDEX "idx_fragments_hash"
    ON "fragments" ("hash");
CREATE UNIQUE INDEX "idx_tools_hash"
    ON "tools" ("hash");
CREATE TRIGGER "responses_ai" AFTER INSERT ON "responses" BEGIN
  INSERT INTO "responses_fts" (rowid, "prompt", "response") VALUES (new.rowid, new."prompt", new."response");
END;
CREATE TRIGGER "responses_ad" AFTER DELETE ON "responses" BEGIN
  INSERT INTO "responses_fts" ("responses_fts", rowid, "prompt", "response") VALUES('delete', old.rowid, old."prompt", old."response");
END;
CREATE TRIGGER "responses_au" AFTER UPDATE ON "responses" BEGIN
  INSERT INTO "responses_fts" ("responses_fts", rowid, "prompt", "response") VALUES('delete', old.rowid, old."prompt", old."response");
  INSERT INTO "responses_fts" (rowid, "prompt", "response") VALUES (new.rowid, new."prompt", new."response");
END;
PRAGMA writable_schema=OFF;
COMMIT;
