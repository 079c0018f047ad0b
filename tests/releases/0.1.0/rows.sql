-- A few rows of every table, as memorylab 0.1.0 wrote them through its API; parents first.
INSERT INTO agents (tenant_id, agent_id, name, name_key, slug, created_at) VALUES ('acme', 'sales', NULL, NULL, NULL, '2026-11-30T23:43:32.322Z');
INSERT INTO agents (tenant_id, agent_id, name, name_key, slug, created_at) VALUES ('acme', 'scout', 'Scöut Ünicode', 'scöut ünicode', 'scout-bot', '2026-11-30T23:43:32.317Z');
INSERT INTO sessions (pk, tenant_id, agent_id, session_id, created_at, updated_at, metadata, cached_prompt, latest_message_id, status) VALUES (1, 'acme', 'scout', 'trip', '2026-11-30T23:43:32.317Z', '2026-11-30T23:43:32.319Z', '{"title":"Zanzibar trip"}', '══════════════════════════════════════════════
NOTES [writable]
══════════════════════════════════════════════
Prefers window seats

══════════════════════════════════════════════
SKILLS [loadable]
══════════════════════════════════════════════
- bug-triage: Reproduce, isolate and fix a failing test or crash before touching unrelated code
- migration-runbook: Plan and run a production database migration with a rehearsal, a cutover and a rollback
- refund-request: Handle a refund or wrong-item complaint from order lookup to confirmation
- trip-itinerary: Turn dates, budget and interests into a day-by-day itinerary with travel times', 'u3', NULL);
INSERT INTO sessions (pk, tenant_id, agent_id, session_id, created_at, updated_at, metadata, cached_prompt, latest_message_id, status) VALUES (2, 'acme', 'sales', 'email:ana@example.com', '2026-11-30T23:43:32.322Z', '2026-11-30T23:43:32.322Z', '{}', NULL, 'msg_c94555c3db1945bf9c93', 'qualified');
INSERT INTO messages (seq, session_pk, id, parent_id, role, parts, text, created_at, metadata, tokens) VALUES (1, 1, 'r1', NULL, 'user', '[{"type":"text","text":"Plan a trip to Zanzibar in March, café stops included"}]', 'Plan a trip to Zanzibar in March, café stops included', '2026-01-02T03:04:05Z', '{}', 18);
INSERT INTO messages (seq, session_pk, id, parent_id, role, parts, text, created_at, metadata, tokens) VALUES (2, 1, 'a1', 'r1', 'assistant', '[{"type":"text","text":"Fly into Stone Town; the spice tour is a must"}]', 'Fly into Stone Town; the spice tour is a must', '2026-01-02T03:04:05Z', '{}', 17);
INSERT INTO messages (seq, session_pk, id, parent_id, role, parts, text, created_at, metadata, tokens) VALUES (3, 1, 'u2', 'a1', 'user', '[{"type":"text","text":"What about the beaches on the east coast?"}]', 'What about the beaches on the east coast?', '2026-01-02T03:04:05Z', '{}', 15);
INSERT INTO messages (seq, session_pk, id, parent_id, role, parts, text, created_at, metadata, tokens) VALUES (4, 1, 'u2b', 'a1', 'user', '[{"type":"text","text":"A second branch: what does the ferry cost?"}]', 'A second branch: what does the ferry cost?', '2026-01-02T03:04:05Z', '{}', 15);
INSERT INTO messages (seq, session_pk, id, parent_id, role, parts, text, created_at, metadata, tokens) VALUES (5, 1, 'u3', 'u2', 'assistant', '[{"type":"text","text":"Paje has kitesurfing and quiet mornings"}]', 'Paje has kitesurfing and quiet mornings', '2026-01-02T03:04:05Z', '{}', 14);
INSERT INTO messages (seq, session_pk, id, parent_id, role, parts, text, created_at, metadata, tokens) VALUES (6, 2, 'msg_c94555c3db1945bf9c93', NULL, 'user', '[{"type":"text","text":"I want a demo of the marmalade tracker"}]', 'I want a demo of the marmalade tracker', '2026-01-02T03:04:05.000Z', '{}', 15);
INSERT INTO compactions (session_pk, id, from_id, to_id, summary, created_at, metadata) VALUES (1, 1, 'r1', 'a1', 'The user plans a March trip to Zanzibar.', '2026-11-30T23:43:32.319Z', '{"model":"test"}');
INSERT INTO context_blocks (session_pk, label, content, updated_at) VALUES (1, 'notes', 'Prefers window seats', '2026-11-30T23:43:32.320Z');
INSERT INTO skill_activations (session_pk, label, key, activated_at) VALUES (1, 'skills', 'trip-itinerary', '2026-11-30T23:43:32.321Z');
INSERT INTO search_entries (pk, tenant_id, namespace, key, content, updated_at) VALUES (1, 'acme', 'faq', 'shipping', 'Parcels ship with DHL', '2026-11-30T23:43:32.323Z');
INSERT INTO kv_entries (pk, tenant_id, namespace, key, value, expires_at, created_at, updated_at) VALUES (1, 'acme', 'prefs', 'theme', '{"dark":true}', '2026-12-01T00:43:32.322Z', '2026-11-30T23:43:32.322Z', '2026-11-30T23:43:32.322Z');
INSERT INTO kv_entries (pk, tenant_id, namespace, key, value, expires_at, created_at, updated_at) VALUES (2, 'acme', 'prefs', 'plain', '[1,2.5,null]', NULL, '2026-11-30T23:43:32.323Z', '2026-11-30T23:43:32.323Z');
INSERT INTO memory_records (pk, workspace, collection, kind, scope, session_id, summary, body, tags, importance, provenance, vector_index, created_at, updated_at) VALUES (1, 'edge', 'memory', 'session_memory', 'SESSION_MEMORY', 'trip', 'Ana''s flight to Zanzibar lands at noon', '{"fact":"lands 12:00"}', '["travel"]', 0.35, '{"source":"manual"}', '{"requested":false,"backend":"fts5","available":true}', '2026-11-30T23:43:32.323Z', '2026-11-30T23:43:32.323Z');
INSERT INTO memory_records (pk, workspace, collection, kind, scope, session_id, summary, body, tags, importance, provenance, vector_index, created_at, updated_at) VALUES (2, 'edge', 'memory', 'global_memory', 'GLOBAL_MEMORY', NULL, 'Ana prefers aisle seats on short flights', '{}', '["preferences"]', 0.5, '{"source":"manual"}', '{"requested":false,"backend":"fts5","available":true}', '2026-11-30T23:43:32.324Z', '2026-11-30T23:43:32.324Z');
