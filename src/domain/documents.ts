// Temporary, until the agent imports the document readers from src/schemas/documents (the next
// commit, after the agent's split lands on main).
export * from '../schemas/documents';
